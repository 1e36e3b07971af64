"""The few phrases `b200` prints to a tenant, in the order's language (en, es, fr), how it writes times, and how
it reads the order file's values (the file is the shop's, but a missing or odd value must not break a login).

Kept inside the node tools (no gettext catalogue on the node); the wording follows the shop's own translations
(locale/*/LC_MESSAGES/django.po: "Tarjetas", "Cartes", "Tiempo restante", "Temps restant").
"""

# The node may run an older Python than the shop: keep this file to Python 3.8.
# ruff: noqa: UP017 - datetime.UTC is Python 3.11

from __future__ import annotations

import datetime as dt
from typing import Any

LANGUAGES = ("en", "es", "fr")

PHRASES = {
    "en": {
        "colon": ": ",
        "welcome": "Welcome to your B200 node",
        "order": "Order",
        "cards": "Cards",
        "healthy": "healthy",
        "unhealthy": "NOT healthy (the shop has been told)",
        "ends": "Ends",
        "left": "left",
        "ended": "ended",
        "data_until": "Files kept until",
        "data_after": "after the end your processes are stopped; your files stay readable over SFTP until",
        "no_data_window": "no data window: copy your results before the end",
        "python": "Validated Python",
        "versions": "Versions",
        "activate": "activate it with",
        "manifest": "Manifest SHA-256",
        "scratch": "Scratch folders",
        "notice": "Notice",
        "none": "none",
        "reason_end": "the rental ends",
        "reason_move": "the rental moves to another node",
        "reason_maintenance": "a maintenance stops this node",
        "notice_line": "{reason} at {at} UTC: save your work, processes get SIGTERM then SIGKILL",
        "help": "Help: b200 --help (status, env, trial, verify)",
    },
    "es": {
        "colon": ": ",
        "welcome": "Bienvenido a su nodo B200",
        "order": "Pedido",
        "cards": "Tarjetas",
        "healthy": "en buen estado",
        "unhealthy": "CON FALLOS (la tienda ya está avisada)",
        "ends": "Fin",
        "left": "restante",
        "ended": "terminado",
        "data_until": "Archivos disponibles hasta",
        "data_after": "al final se detienen sus procesos; sus archivos se pueden leer por SFTP hasta el",
        "no_data_window": "sin ventana de datos: copie sus resultados antes del final",
        "python": "Python validado",
        "versions": "Versiones",
        "activate": "actívelo con",
        "manifest": "SHA-256 del manifiesto",
        "scratch": "Carpetas de trabajo",
        "notice": "Aviso",
        "none": "ninguno",
        "reason_end": "el alquiler termina",
        "reason_move": "el alquiler pasa a otro nodo",
        "reason_maintenance": "un mantenimiento detiene este nodo",
        "notice_line": "{reason} el {at} UTC: guarde su trabajo, los procesos reciben SIGTERM y luego SIGKILL",
        "help": "Ayuda: b200 --help (status, env, trial, verify)",
    },
    "fr": {
        "colon": " : ",  # French sets a space before the colon
        "welcome": "Bienvenue sur votre nœud B200",
        "order": "Commande",
        "cards": "Cartes",
        "healthy": "en bon état",
        "unhealthy": "EN DÉFAUT (la boutique est prévenue)",
        "ends": "Fin",
        "left": "restant",
        "ended": "terminée",
        "data_until": "Fichiers conservés jusqu’au",
        "data_after": "à la fin vos processus sont arrêtés ; vos fichiers restent lisibles par SFTP jusqu’au",
        "no_data_window": "pas de fenêtre de données : copiez vos résultats avant la fin",
        "python": "Python validé",
        "versions": "Versions",
        "activate": "activez-le avec",
        "manifest": "SHA-256 du manifeste",
        "scratch": "Dossiers de travail",
        "notice": "Avis",
        "none": "aucun",
        "reason_end": "la location se termine",
        "reason_move": "la location passe sur un autre nœud",
        "reason_maintenance": "une maintenance arrête ce nœud",
        "notice_line": "{reason} le {at} UTC : enregistrez votre travail, les processus reçoivent SIGTERM puis SIGKILL",
        "help": "Aide : b200 --help (status, env, trial, verify)",
    },
}
# Days, hours, minutes.
UNITS = {"en": ("d", "h", "min"), "es": ("d", "h", "min"), "fr": ("j", "h", "min")}


def language_of(value: object) -> str:
    return value if isinstance(value, str) and value in PHRASES else "en"


def phrase(language: str, key: str) -> str:
    return PHRASES[language_of(language)][key]


def labelled(language: str, key: str, value: str) -> str:
    """ "Cards: ..." as the language writes it ("Cartes : ...")."""
    return f"{phrase(language, key)}{phrase(language, 'colon')}{value}"


def duration(seconds: int, language: str) -> str:
    """Whole minutes, the largest units first: "1 d 3 h 12 min"."""
    day, hour, minute = UNITS[language_of(language)]
    days, rest = divmod(max(0, seconds), 86400)
    hours, rest = divmod(rest, 3600)
    parts = [f"{days} {day}"] if days else []
    parts += [f"{hours} {hour}"] if days or hours else []
    return " ".join(parts + [f"{rest // 60} {minute}"])


def parse_time(value: object) -> dt.datetime | None:
    """An ISO 8601 time from the state file; "Z" and a missing zone both mean UTC (fromisoformat takes "Z" only
    from Python 3.11)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def utc(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def seconds_until(moment: dt.datetime | None) -> int:
    """Whole seconds from now, never negative (an end already past reads 0)."""
    if moment is None:
        return 0
    return max(0, int((moment - now()).total_seconds()))


def section(mapping: object, key: str) -> dict[str, Any]:
    """mapping[key] when both are JSON objects, else an empty one."""
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, dict) else {}


def items(mapping: object, key: str) -> list[Any]:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, list) else []
