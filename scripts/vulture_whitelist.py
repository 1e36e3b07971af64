"""Names the dead-code finder (`vulture`, run by `make lint` with [tool.vulture] in pyproject.toml) reports at 80 %
confidence but that are used: parameters a framework passes by position, so their names must stay in the
signature although the body does not read them. Vulture reads this file as code that uses each name; it is never
imported. Add a name only with the caller that needs it; a name here hides every unused variable of that name."""

# ruff: noqa: B018


class _Whitelist:
    """Any attribute: the file also runs (vulture's whitelist_utils.Whitelist, without importing vulture)."""

    def __getattr__(self, name: str) -> None:
        return None


_ = _Whitelist()

# config/staff_login.py, lockout_response: django-axes calls AXES_LOCKOUT_CALLABLE(request, original_response,
# credentials) by position (and falls back to two arguments on a TypeError, so the three must stay).
_.original_response
_.credentials

# core/ratelimit.py, RateLimitMiddleware.process_view: Django calls process_view(request, view_func, view_args,
# view_kwargs) by position.
_.view_func
_.view_args
_.view_kwargs

# payments/fields.py, from_db_value: Django calls a field's from_db_value(value, expression, connection).
_.expression

# provisioning/preflight/collectives.py, __torch_dispatch__(func, types, args, kwargs): PyTorch's dispatch protocol.
_.types
