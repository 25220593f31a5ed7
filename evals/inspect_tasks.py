"""The scenarios as an Inspect AI task: ``pip install 'radiance-mcp[evals]'``, then

    inspect eval evals/inspect_tasks.py --model PROVIDER/MODEL            # every scenario
    inspect eval evals/inspect_tasks.py --model PROVIDER/MODEL -T scenario=NAME
    inspect eval evals/inspect_tasks.py --model PROVIDER/MODEL -T skills=false   # no procedure in the prompt
    inspect eval evals/inspect_tasks.py --model mockllm/model -T agent=reference  # a scripted agent plays the model

The task lives in radiance_mcp.evals.inspect_task (importable, tested); this file names it
for ``inspect eval``, which finds tasks by their @task in the file it is given.
"""

from inspect_ai import Task, task

from radiance_mcp.evals.inspect_task import radiance_task


@task
def radiance(
    scenario: str | None = None, scenarios_dir: str | None = None, skills: bool = True, agent: str | None = None
) -> Task:
    """Every scenario (or the one named), the server's tools to the model, our scorer."""
    return radiance_task(scenario=scenario, scenarios_dir=scenarios_dir, skills=skills, agent=agent)
