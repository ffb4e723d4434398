"""The headline experiment (issue 9), owned by the product so that `manage.py headline` runs
wherever the console does (the Docker image included): the arms the headline claim needs,
(a) FCFS, (b) the engine's priority alone, (c) and (d) the gateway with seed 000's tier config
and (e) the searched config, defined once (catalog.py),
fresh engines and gateways as subprocesses per arm (procs.py, arms.py), the seeded mixed
workload (workload.py), the engine's and gateway's figures (telemetry.py), the saturation
sweep (saturation.py), the tier-config search (search.py, on the sweeps' planner), the
report (report.py), the run (experiment.py, options.py) and its storage as benchmark runs
(store.py).

It lives in the bench app because its arms end as benchmark runs and its search is a sweep's
coordinate descent (console/bench/sweeps/). The experiments beyond the headline (paired
rounds, the other arms, their data) are in lab/, outside the product: lab may import this
package, never the reverse.
"""
