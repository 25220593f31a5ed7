"""Rules the tools keep, each in one place: the arithmetic, the verdict and the remedy.

capacity (the ceiling of every engine, radiance's pool contract), contract (the pool contract of a boot of
any engine, by the rule of its rate), settled (a boot that did not settle has no ceiling), reserves (each
traced to its line), probe_shape (what a boot lets a probe ask), probe_verdicts (what an answer shows),
remote_words (every word sent to a host).
"""
