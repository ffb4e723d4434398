"""`python -m lab.headline`: the headline experiment (issue 9) as a measuring script.

The experiment itself is the product's (console/bench/headline/, also `python manage.py
headline`); this script adds what only a developer checkout has: `--engine vllm` runs vLLM's
CPU build on the tiny random Llama of tools/vllm_env.py (`make vllm-env`), pinned to core 0.
"""
