"""REST API of rollouts: views.py (the viewset and its serializers)."""
