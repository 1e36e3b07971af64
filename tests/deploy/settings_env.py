"""Which environment variables the project reads, found in its source; real-looking production values."""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import yaml

from tests.servers import ROOT

COMPOSE_FILE = ROOT / "docker-compose.yml"
SOURCE_PACKAGES = ("config", "shop", "payments", "provisioning")
ENV_HELPERS = {"env_str", "env_bool", "env_int", "env_list"}
# Read by prefix: `CHAIN_RPC_URLS_<NETWORK>` (payments.networks.rpc_env_name).
ENV_PREFIXES = ("CHAIN_RPC_URLS_",)


def _python_files() -> list[Path]:
    return [
        path
        for package in SOURCE_PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level `NAME = "constant"`: a variable's name may be passed through one (KEY_FILE_ENV)."""
    strings = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            strings.update({target.id: node.value.value for target in node.targets if isinstance(target, ast.Name)})
    return strings


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _read_name(node: ast.AST) -> ast.AST | None:
    """The name argument of an environment read: env_*(NAME), os.environ.get/setdefault(NAME), os.getenv(NAME),
    os.environ[NAME]."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ENV_HELPERS:
            return node.args[0]
        if isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault") and _is_environ(func.value):
            return node.args[0]
        if isinstance(func, ast.Attribute) and func.attr == "getenv":
            return node.args[0]
    if isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
        return node.slice
    return None


def variables_read() -> set[str]:
    """Every environment variable name the settings and the apps read, by scanning their source."""
    names = set()
    for path in _python_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        strings = _module_strings(tree)
        for node in ast.walk(tree):
            argument = _read_name(node)
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                names.add(argument.value)
            elif isinstance(argument, ast.Name) and argument.id in strings:
                names.add(strings[argument.id])
    return names


def is_read(name: str, read: set[str]) -> bool:
    return name in read or any(name.startswith(prefix) and name != prefix for prefix in ENV_PREFIXES)


def production_values() -> dict[str, str]:
    """What an operator sets: a random secret key, the account xpub of a random mnemonic, a manifest key."""
    from bip_utils import Bip39MnemonicGenerator, Bip39SeedGenerator, Bip39WordsNum, Bip44, Bip44Coins
    from django.core.management.utils import get_random_secret_key

    mnemonic = Bip39MnemonicGenerator().FromWordsNumber(Bip39WordsNum.WORDS_NUM_24).ToStr()
    account = Bip44.FromSeed(Bip39SeedGenerator(mnemonic).Generate(), Bip44Coins.ETHEREUM).Purpose().Coin().Account(0)
    return {
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DJANGO_SECRET_KEY": get_random_secret_key() + secrets.token_urlsafe(8),
        "DJANGO_ALLOWED_HOSTS": "shop.example.org",
        "PAYMENTS_XPUB": account.PublicKey().ToExtended(),
        "MANIFEST_SIGNING_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
    }


def clean_environment(**values: str) -> dict[str, str]:
    """This process's environment without the project's own variables, plus `values`."""
    read = variables_read()
    env = {key: value for key, value in os.environ.items() if not is_read(key, read)}
    env.update(values)
    return env


def service_environment(service: dict) -> dict[str, str]:
    """A compose service's `environment`, in either of its forms."""
    env = service.get("environment", {})
    if isinstance(env, list):  # the KEY=value form
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return env


# The innermost `${NAME}`, `${NAME:-default}`, `${NAME-default}`, `${NAME:?error}` or `${NAME?error}`.
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^{}]*))?\}")


def compose_value(text: str, dotenv: dict[str, str]) -> str:
    """A value of the compose file as the container gets it, with an operator's `.env` (`dotenv`)."""

    def resolve(match: re.Match) -> str:
        name, colon, kind, word = match.groups()
        given = dotenv.get(name)
        missing = given is None or (colon == ":" and given == "")
        if missing and kind == "?":
            raise ValueError(f"compose refuses to start without {name}: {word}")
        return (word or "") if missing and kind == "-" else (given or "")

    text = str(text).replace("$$", "\x00")
    while True:
        resolved = _INTERPOLATION.sub(resolve, text)
        if resolved == text:
            return resolved.replace("\x00", "$")
        text = resolved


def compose_service_environment(name: str, dotenv: dict[str, str]) -> dict[str, str]:
    """The environment docker-compose.yml gives service `name`, with an operator's `.env`."""
    service = yaml.safe_load(COMPOSE_FILE.read_text())["services"][name]
    return {key: compose_value(value, dotenv) for key, value in service_environment(service).items()}


def compose_operator_values() -> dict[str, str]:
    """What an operator's `.env` holds at least: every value the compose file refuses to start without."""
    return {
        **production_values(),
        "SITE_URL": "https://shop.example.org",
        "POSTGRES_PASSWORD": "a" * 32,
        "REDIS_PASSWORD": "b" * 32,
    }


def settings_under(environment: dict[str, str], prefix: str) -> dict[str, object]:
    """The settings whose names start with `prefix`, as the settings module `environment` names computes them
    from `environment` alone, in a fresh interpreter (this process's settings were made from its own)."""
    code = (
        "import importlib, json, os; "
        "module = importlib.import_module(os.environ['DJANGO_SETTINGS_MODULE']); "
        f"print(json.dumps({{k: v for k, v in vars(module).items() if k.startswith({prefix!r})}}))"
    )
    read = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean_environment(**environment),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert read.returncode == 0, read.stderr
    return json.loads(read.stdout)
