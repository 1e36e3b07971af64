"""The PyTorch preparations' setup step makes sure the node can run torch.compile.

Triton compiles a small launcher with the host's C compiler and the Python headers the first time it
compiles, so a node with "only Python and PyTorch" fails the preflight's step_time. The step installs gcc
and the headers when they are missing and it can (root, apt-get or dnf), and otherwise stops saying what
to install. The preparation runs it as `env PREFLIGHT_PYTHON=<node python> PREFLIGHT_DEVICE=<device> bash
setup.sh`. Staff may extend it in the admin; a preparation whose script was already edited is left alone.
"""

from django.db import migrations

COMPILER_SETUP = r"""#!/bin/bash
# Triton (torch.compile on GPUs) builds its launcher with the host's C compiler and the Python headers.
set -eu
python="${PREFLIGHT_PYTHON:-python3}"
device="${PREFLIGHT_DEVICE:-cuda}"
headers() {
  "$python" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
}
ready() { command -v gcc >/dev/null 2>&1 && headers; }
if ready; then
  echo "torch.compile can build: $(gcc --version | head -n 1); Python headers for $python"
  exit 0
fi
if [ "$device" != cuda ]; then
  echo "note: gcc or the Python development headers are missing; torch.compile on this CPU node would need them" >&2
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc python3-dev
elif [ "$(id -u)" = 0 ] && command -v dnf >/dev/null 2>&1; then
  dnf install -y gcc python3-devel
fi
if ! ready; then
  echo "gcc and the Python development headers for $python are missing and $(id -un) cannot install them:" \
       "install gcc and python3-dev (Triton compiles its launcher with them on the first torch.compile)" >&2
  exit 1
fi
echo "installed gcc and the Python development headers for torch.compile"
"""

PREPARATIONS = ("pytorch-blackwell", "two-card-distributed")


def add_compiler_setup(apps, schema_editor):
    Preparation = apps.get_model("orders", "Preparation")
    Preparation.objects.filter(slug__in=PREPARATIONS, setup_script="").update(setup_script=COMPILER_SETUP)


def remove_compiler_setup(apps, schema_editor):
    Preparation = apps.get_model("orders", "Preparation")
    Preparation.objects.filter(slug__in=PREPARATIONS, setup_script=COMPILER_SETUP).update(setup_script="")


class Migration(migrations.Migration):
    dependencies = [("orders", "0006_outgoing_emails")]
    operations = [migrations.RunPython(add_compiler_setup, remove_compiler_setup)]
