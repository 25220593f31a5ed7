"""The scenarios as an Inspect AI task: ``pip install 'radiance-mcp[evals]'``, then

    inspect eval evals/inspect_tasks.py --model PROVIDER/MODEL            # every scenario, 3 epochs each
    inspect eval evals/inspect_tasks.py --model PROVIDER/MODEL -T scenario=NAME
    inspect eval evals/inspect_tasks.py --model PROVIDER/MODEL -T skills=false   # no procedure in the prompt
    inspect eval evals/inspect_tasks.py --model PROVIDER/MODEL -T epochs=5 -T time_limit=600 -T message_limit=80
    inspect eval evals/inspect_tasks.py --model PROVIDER/MODEL -T reducer=mean,pass_k_2
    inspect eval evals/inspect_tasks.py --model mockllm/model -T agent=reference  # a scripted agent plays the model

The task lives in radiance_mcp.evals.inspect_task (importable, tested; its docstring says what
each -T option does); this file names it for ``inspect eval``, which finds tasks by their @task
in the file it is given.
"""

from inspect_ai import Task, task

from radiance_mcp.evals.inspect_task import EPOCHS, MESSAGE_LIMIT, TIME_LIMIT, radiance_task


@task
def radiance(
    scenario: str | None = None, scenarios_dir: str | None = None, skills: bool = True, agent: str | None = None,
    epochs: int = EPOCHS, reducer: str | list[str] | None = None, time_limit: int = TIME_LIMIT,
    message_limit: int = MESSAGE_LIMIT,
) -> Task:
    """Every scenario (or the one named), the server's tools to the model, our scorer; epochs runs of each,
    reduced by reducer (default: mean, pass_at_EPOCHS, pass_k_EPOCHS); time and message limits per sample."""
    return radiance_task(scenario=scenario, scenarios_dir=scenarios_dir, skills=skills, agent=agent, epochs=epochs,
                         reducer=reducer, time_limit=time_limit, message_limit=message_limit)
