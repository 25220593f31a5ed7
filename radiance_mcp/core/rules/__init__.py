"""Rules the tools keep, each in one place: the arithmetic, the verdict and the remedy.

capacity (ceiling, floor, pool contract, slab slope, arms), reserves (each traced to its line),
engine_capacity (the same for vLLM, SGLang and llama.cpp boots), probe_shape (what a boot lets a
probe ask), probe_verdicts (what an answer shows), remote_words (every word sent to a host).
"""
