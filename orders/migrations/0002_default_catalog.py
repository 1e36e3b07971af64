"""The default catalog, so that a fresh database can sell at once. Staff edit it in the admin."""

from decimal import Decimal

from django.db import migrations

DURATIONS = [
    (3, Decimal("899.00"),
     "Validate a distributed launch you prepared in advance.",
     "Validar un lanzamiento distribuido preparado de antemano.",
     "Valider un lancement distribué préparé à l'avance."),
    (7, Decimal("1990.00"),
     "Run and compare several variants or settings.",
     "Ejecutar y evaluar varias variantes o configuraciones.",
     "Exécuter et évaluer plusieurs variantes ou réglages."),
    (30, Decimal("7900.00"),
     "A sustained campaign with regular checkpoints and defined stopping criteria.",
     "Una campaña sostenida con checkpoints regulares y criterios de parada definidos.",
     "Une campagne soutenue avec des checkpoints réguliers et des critères d'arrêt définis."),
]

PREPARATIONS = [
    ("bare-node", 1,
     ("Bare node", "Nodo desnudo", "Nœud nu"),
     ("NVIDIA driver and CUDA, nothing else: you install your own stack.",
      "Controlador NVIDIA y CUDA, nada más: usted instala su propio entorno.",
      "Pilote NVIDIA et CUDA, rien d'autre : vous installez votre propre pile.")),
    ("pytorch-blackwell", 2,
     ("Validated PyTorch stack for Blackwell", "Pila PyTorch validada para Blackwell",
      "Pile PyTorch validée pour Blackwell"),
     ("PyTorch 2.7 or newer built for CUDA 12.8+, with sm_100 kernels proven on both cards: model load, "
      "forward, gradients and a checkpoint write.",
      "PyTorch 2.7 o posterior compilado para CUDA 12.8+, con kernels sm_100 probados en las dos tarjetas: "
      "carga del modelo, forward, gradientes y escritura de un checkpoint.",
      "PyTorch 2.7 ou plus récent compilé pour CUDA 12.8+, avec des kernels sm_100 éprouvés sur les deux cartes : "
      "chargement du modèle, forward, gradients et écriture d'un checkpoint.")),
    ("two-card-distributed", 3,
     ("Validated two-card distributed setup", "Configuración distribuida validada en dos tarjetas",
      "Configuration distribuée validée sur deux cartes"),
     ("The PyTorch stack plus a rehearsed split across both cards: sharding (FSDP2), the all-reduce and its "
      "bandwidth, checkpoint and bitwise restore, peak memory per card.",
      "La pila PyTorch más un reparto ensayado entre las dos tarjetas: sharding (FSDP2), el all-reduce y su "
      "ancho de banda, checkpoint y restauración bit a bit, memoria máxima por tarjeta.",
      "La pile PyTorch plus une répartition répétée sur les deux cartes : sharding (FSDP2), l'all-reduce et "
      "sa bande passante, checkpoint et restauration bit à bit, mémoire maximale par carte.")),
]


def create_catalog(apps, schema_editor):
    LotSpec = apps.get_model("orders", "LotSpec")
    Duration = apps.get_model("orders", "Duration")
    Preparation = apps.get_model("orders", "Preparation")
    if not LotSpec.objects.exists():
        LotSpec.objects.create(gpu_model="NVIDIA B200", gpus_per_lot=2, gpu_memory_gb=180, memory_type="HBM3e")
    for days, price, en, es, fr in DURATIONS:
        Duration.objects.get_or_create(
            days=days, defaults={"price_per_lot_usd": price, "purpose_en": en, "purpose_es": es, "purpose_fr": fr}
        )
    for slug, position, names, descriptions in PREPARATIONS:
        Preparation.objects.get_or_create(
            slug=slug,
            defaults={
                "position": position,
                "name_en": names[0], "name_es": names[1], "name_fr": names[2],
                "description_en": descriptions[0], "description_es": descriptions[1],
                "description_fr": descriptions[2],
            },
        )


class Migration(migrations.Migration):
    dependencies = [("orders", "0001_initial")]
    operations = [migrations.RunPython(create_catalog, migrations.RunPython.noop)]
