"""What each default preparation proves on the node before hand-over (preflight profiles, as data).

Staff edit them in the admin; the keys are those of provisioning/preflight/profile.py.
"""

from django.db import migrations

HARDWARE = ["idle_cards", "gpu_health", "nvlink", "dcgm_diag"]
PROFILES = {
    # Driver and CUDA only: the stack and the cards, not a training rehearsal.
    "bare-node": {"name": "bare-node", "checks": ["stack", "arch", *HARDWARE], "expect_arch": "sm_100"},
    # PyTorch for Blackwell on each card: load, forward, gradients, a checkpoint.
    "pytorch-blackwell": {
        "name": "pytorch-blackwell",
        "checks": ["stack", "arch", "extensions", "load", "forward", "backward", "checkpoint_write",
                   "checkpoint_restore", "allreduce", "memory_balance", "step_time", *HARDWARE],
        "shard": False,
        "expect_arch": "sm_100",
    },
    # The whole rehearsal, sharded with FSDP2 over both cards.
    "two-card-distributed": {"name": "two-card-distributed", "shard": True, "expect_arch": "sm_100"},
}


def set_profiles(apps, schema_editor):
    Preparation = apps.get_model("orders", "Preparation")
    for slug, profile in PROFILES.items():
        Preparation.objects.filter(slug=slug, preflight_profile={}).update(preflight_profile=profile)


class Migration(migrations.Migration):
    dependencies = [("orders", "0003_rental_clock_and_preparation_profile")]
    operations = [migrations.RunPython(set_profiles, migrations.RunPython.noop)]
