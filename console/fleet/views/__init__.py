"""Fleet pages, one module per noun: nodes.py, keys.py (gateway keys), endpoints.py."""
