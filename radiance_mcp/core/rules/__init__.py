"""Rules the tools keep, each in one place: the arithmetic, the verdict and the remedy.

book (every rule's name, statement and one home; Check, a rule's answer), capacity (the ceiling of every engine,
the pair under it, radiance's pool contract and dtypes, free memory given from outside), contract (the pool
contract of a boot of any engine, by the rule of its rate; the seats it serves), sampler (the sampler-row bound),
shared (a physical card several services share), plan (a resize plan as one value, and what judges it), deploy
(the boot a verification may read), settled (a boot that did not settle has no ceiling), reserves (each traced to
its line), probe_shape (what a boot lets a probe ask), probe_verdicts (what an answer shows), unprinted (what an
engine costs that its log does not print), remote_words (every word sent to a host).
"""
