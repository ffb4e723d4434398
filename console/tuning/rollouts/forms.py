"""The "new rollout" form. It preselects what an operator most likely wants next: the newest
tier config version that not every node already desires (in the demo, "default" v2)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import Count

from console.fleet.choices import NodeStatus
from console.fleet.models import Node
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from console.tuning.rollouts import probe, services
from console.tuning.rollouts.choices import GuardWhenQuiet, NodeSelection, StaleTargets


class _VersionChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.label} — {obj.message}" if obj.message else obj.label


class _NodeChoice(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        labels = f" [{', '.join(obj.labels)}]" if obj.labels else ""
        status = obj.status()
        stale = f" — {NodeStatus(status).label}" if status in STALE else ""
        return f"{obj.name}{labels}{stale}"


STALE = (NodeStatus.NEW, NodeStatus.STALE)


def suggested_tier_config() -> TierConfigVersion | None:
    """The newest version some node does not desire yet (None when there are no nodes)."""
    total = Node.objects.count()
    if not total:
        return None
    desired = dict(
        Node.objects.values("desired_tier_config")
        .annotate(n=Count("id"))
        .values_list("desired_tier_config", "n")
    )
    for version in TierConfigVersion.objects.order_by("-created_at", "-id")[:200]:
        if desired.get(version.pk, 0) < total:
            return version
    return None


class RolloutForm(forms.Form):
    tier_config = _VersionChoice(
        queryset=TierConfigVersion.objects.order_by("name", "-version"),
        required=False,
        empty_label="(leave as it is)",
    )
    launch_profile = _VersionChoice(
        queryset=LaunchProfileVersion.objects.order_by("name", "-version"),
        required=False,
        empty_label="(leave as it is)",
        help_text="Engines restart one wave at a time (managed nodes only).",
    )
    node_selection = forms.ChoiceField(
        choices=NodeSelection.choices,
        initial=NodeSelection.ALL,
        widget=forms.RadioSelect,
        label="Nodes",
    )
    nodes = _NodeChoice(
        queryset=Node.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Selected nodes",
    )
    label = forms.CharField(required=False, max_length=100, label="Label")
    stale_targets = forms.ChoiceField(
        choices=StaleTargets.choices,
        initial=StaleTargets.EXCLUDE,
        label="Stale or never-seen targets",
        help_text="Their agents are not reporting: including them only times the rollout out.",
    )
    canary_count = forms.IntegerField(min_value=0, initial=1, label="Canary nodes")
    wave_size = forms.IntegerField(
        min_value=0,
        initial=0,
        label="Wave size",
        help_text="Nodes per wave after the canaries; 0: all the rest at once.",
    )
    convergence_timeout_s = forms.FloatField(
        min_value=1,
        max_value=services.MAX_TIMEOUT_S,
        initial=services.DEFAULT_TIMEOUT_S,
        label="Convergence timeout (s)",
    )
    canary_soak_s = forms.FloatField(
        min_value=0,
        max_value=services.MAX_WINDOW_S,
        initial=services.DEFAULT_CANARY_SOAK_S,
        label="Canary soak (s)",
        help_text=f"The canary wave runs this long, watched, before the next wave "
        f"(default {services.DEFAULT_CANARY_SOAK_S:g} s; 0: no soak).",
    )
    guard_max_ttft_p99_regression_pct = forms.FloatField(
        min_value=0,
        required=False,
        initial=services.DEFAULT_GUARD_TTFT_P99_REGRESSION_PCT,
        label="SLO guard: max TTFT P99 regression (%)",
        help_text=f"Default {services.DEFAULT_GUARD_TTFT_P99_REGRESSION_PCT:g} %; "
        "empty: no TTFT check.",
    )
    guard_max_error_rate = forms.FloatField(
        min_value=0,
        max_value=1,
        required=False,
        initial=services.DEFAULT_GUARD_ERROR_RATE,
        label="SLO guard: max error rate (0-1)",
        help_text=f"Default {services.DEFAULT_GUARD_ERROR_RATE:g}; empty: no error-rate check.",
    )
    guard_window_s = forms.FloatField(
        min_value=1,
        max_value=services.MAX_WINDOW_S,
        initial=services.DEFAULT_GUARD_WINDOW_S,
        label="SLO guard: window after each later wave (s)",
    )
    guard_tier = forms.CharField(
        max_length=50,
        required=False,
        label="SLO guard: tier",
        help_text="Empty: the most urgent tier of the tier config rolled out.",
    )
    guard_when_quiet = forms.ChoiceField(
        choices=GuardWhenQuiet.choices,
        initial=GuardWhenQuiet.PROBE,
        required=False,
        label="SLO guard: when a wave is too quiet to judge",
        help_text="Probe: send it a short load of its own (through its gateway) and judge "
        "that; pause: stop and ask you. Never passed unseen.",
    )
    guard_probe_s = forms.FloatField(
        min_value=probe.MIN_PROBE_S,
        max_value=probe.MAX_PROBE_S,
        required=False,
        initial=services.DEFAULT_GUARD_PROBE_S,
        label="SLO guard: probe length (s)",
    )
    message = forms.CharField(required=False, max_length=500, label="Why")

    def clean_guard_tier(self) -> str | None:
        return self.cleaned_data["guard_tier"] or None  # None: services.guard_tier_of

    def clean_guard_when_quiet(self) -> str:
        return str(self.cleaned_data["guard_when_quiet"] or GuardWhenQuiet.PROBE)

    def clean_guard_probe_s(self) -> float:
        value = self.cleaned_data["guard_probe_s"]
        return services.DEFAULT_GUARD_PROBE_S if value is None else float(value)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if (
            not self.is_bound
            and "tier_config" not in self.initial
            and "launch_profile" not in self.initial
        ):
            suggested = suggested_tier_config()
            if suggested is not None:
                self.fields["tier_config"].initial = suggested.pk
        nodes = self.fields["nodes"]
        # The _NodeChoice declared above, queryset and all; `fields` types it as a bare Field.
        assert isinstance(nodes, _NodeChoice) and nodes.queryset is not None
        self.stale_nodes = [n for n in nodes.queryset if n.status() in STALE]
