"""GPU nodes: one node is one lot of two cards. Preparation and access come with provisioning."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class NodeDriver(models.TextChoices):
    LOCAL = "local", "local (runs on this machine, development)"
    SSH = "ssh", "ssh"


class NodeState(models.TextChoices):
    AVAILABLE = "available", "available"
    ALLOCATED = "allocated", "allocated"
    PREPARING = "preparing", "preparing"
    IN_USE = "in_use", "in use"
    MAINTENANCE = "maintenance", "maintenance"
    FAILED = "failed", "failed"


# Nodes in these states are never offered for sale.
UNSELLABLE_STATES = (NodeState.MAINTENANCE, NodeState.FAILED)


class Node(models.Model):
    name = models.CharField(max_length=100, unique=True)
    driver = models.CharField(max_length=10, choices=NodeDriver.choices, default=NodeDriver.SSH)
    host = models.CharField(max_length=255, blank=True)
    port = models.PositiveIntegerField(default=22)
    user = models.CharField(max_length=64, blank=True)
    host_key = models.TextField(blank=True, help_text="The node's SSH host public key, pinned.")
    gpu_model = models.CharField(max_length=100, default="NVIDIA B200")
    gpu_count = models.PositiveSmallIntegerField(default=2)
    python = models.CharField(max_length=255, default="python3", help_text="The Python that runs the preflight.")
    state = models.CharField(max_length=16, choices=NodeState.choices, default=NodeState.AVAILABLE)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
