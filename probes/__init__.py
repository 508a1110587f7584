"""What each layer of a frozen biLM knows: the paper's intrinsic probes (Sec. 5.3, Tables 4-6).

``wsd`` (Table 5), ``pos`` (Table 6) and ``neighbours`` (Table 4); ``python -m probes`` runs one, the runner's probe
sweeps (runner/sweeps/table4-6.json) run them for a profile. Plain numpy/torch; no AllenNLP.
"""
