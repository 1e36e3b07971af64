"""The PyTorch preparations' setup step gets torch.compile's compiler onto the node, or says what is missing.

The script is the one the migration stores in the preparations (the text a node receives), run with bash
as the preparation runs it. The commands it asks about are fakes in a folder that is the whole PATH: a node's
gcc, Python, `id` and package manager, so that the test decides what the node has and who the login is,
and nothing is ever installed on this machine.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orders.models import Preparation
from provisioning.models import Node
from provisioning.node_steps import setup_command

# No gcc at first: the fake apt-get "installs" it, and the headers the fake Python looks for.
FAKES = {
    "python": '#!/bin/sh\n[ -e "$NODE/headers" ]\n',
    "id": '#!/bin/sh\ncase "$1" in -u) cat "$NODE/uid";; -un) echo ops;; esac\n',
    "apt-get": '#!/bin/sh\necho "$@" > "$NODE/apt-get.args"\n'
    'printf "#!/bin/sh\\necho gcc 14.2.0\\n" > "$NODE/bin/gcc"; chmod +x "$NODE/bin/gcc"; touch "$NODE/headers"\n',
}


@pytest.fixture
def node(tmp_path):
    """A fake node's commands: PATH is this folder alone (plus the shell's own helpers, linked one by one)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("env", "bash", "head", "cat", "chmod", "touch", "printf"):
        target = next(Path(folder) / name for folder in ("/usr/bin", "/bin") if (Path(folder) / name).exists())
        (bin_dir / name).symlink_to(target)
    for name, text in FAKES.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "uid").write_text("1000\n")
    return tmp_path


def run_setup(node: Path, device: str) -> subprocess.CompletedProcess:
    script = node / "setup.sh"
    script.write_text(Preparation.objects.get(slug="two-card-distributed").setup_script)
    row = Node(python=str(node / "bin" / "python"), preflight_device=device)
    environment = {"PATH": str(node / "bin"), "NODE": str(node)}
    return subprocess.run(setup_command(row, str(script)), env=environment, capture_output=True, text=True, timeout=30)


@pytest.mark.django_db
def test_both_pytorch_preparations_carry_the_compiler_setup_and_the_bare_node_does_not():
    scripts = dict(Preparation.objects.values_list("slug", "setup_script"))
    assert "gcc" in scripts["pytorch-blackwell"] and scripts["pytorch-blackwell"] == scripts["two-card-distributed"]
    assert scripts["bare-node"] == ""


@pytest.mark.django_db
def test_a_ready_node_is_left_as_it_is(node):
    (node / "headers").touch()
    (node / "bin" / "gcc").write_text("#!/bin/sh\necho gcc 12.2.0\n")
    (node / "bin" / "gcc").chmod(0o755)

    done = run_setup(node, "cuda")

    assert done.returncode == 0, done.stderr
    assert "torch.compile can build: gcc 12.2.0" in done.stdout
    assert not (node / "apt-get.args").exists()


@pytest.mark.django_db
def test_a_gpu_node_reached_as_root_gets_gcc_and_the_headers_installed(node):
    (node / "uid").write_text("0\n")

    done = run_setup(node, "cuda")

    assert done.returncode == 0, done.stderr
    assert (node / "apt-get.args").read_text().split() == [
        "install",
        "-y",
        "--no-install-recommends",
        "gcc",
        "python3-dev",
    ]
    assert "installed gcc and the Python development headers" in done.stdout


@pytest.mark.django_db
def test_a_gpu_node_that_cannot_install_them_stops_saying_what_to_install(node):
    done = run_setup(node, "cuda")

    assert done.returncode == 1
    assert "install gcc and python3-dev" in done.stderr and "ops cannot install them" in done.stderr
    assert not (node / "apt-get.args").exists()


@pytest.mark.django_db
def test_a_cpu_development_node_only_gets_a_note(node):
    done = run_setup(node, "cpu")

    assert done.returncode == 0
    assert "torch.compile on this CPU node would need them" in done.stderr
