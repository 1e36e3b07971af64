"""Staff login: django-axes locks a username+IP pair out after 5 failures; TOTP is asked only of users with a device."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django_otp.oath import totp
from django_otp.plugins.otp_totp.models import TOTPDevice

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def axes_on(settings):
    settings.AXES_ENABLED = True


def staff(username: str):
    return get_user_model().objects.create_user(username, password=PASSWORD, is_staff=True, is_superuser=True)


def log_in(client: Client, username: str, password: str = PASSWORD, **extra):
    return client.post("/admin/login/?next=/admin/", {"username": username, "password": password, **extra})


def is_in_admin(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def test_a_staff_user_without_a_device_logs_in_with_the_password_alone():
    staff("ana")
    client = Client()
    assert log_in(client, "ana").status_code == 302
    assert is_in_admin(client)


def test_a_user_with_a_confirmed_device_and_a_missing_or_wrong_code_stays_logged_out():
    device = TOTPDevice.objects.create(user=staff("bo"), name="phone", confirmed=True)
    wrong = f"{(totp(device.bin_key) + 1) % 1_000_000:06d}"
    for extra in ({}, {"otp_token": wrong}):
        client = Client()
        assert log_in(client, "bo", **extra).status_code == 200
        assert not is_in_admin(client)


def test_a_user_with_a_confirmed_device_and_the_right_code_gets_into_the_admin():
    device = TOTPDevice.objects.create(user=staff("cy"), name="phone", confirmed=True)
    client = Client()
    assert log_in(client, "cy", otp_token=f"{totp(device.bin_key):06d}").status_code == 302
    assert is_in_admin(client)


def test_five_wrong_passwords_lock_out_the_sixth_try_with_the_right_one_but_not_another_username():
    staff("dee")
    staff("eve")
    answers = [log_in(Client(), "dee", "wrong").status_code for _ in range(5)]
    assert answers == [200, 200, 200, 200, 429]  # the fifth failure already answers "locked"
    locked = log_in(Client(), "dee")
    assert locked.status_code == 429
    assert "This login is locked after too many failed attempts" in locked.content.decode()
    assert locked["Retry-After"] == "900"  # the 15-minute cool-off
    client = Client()
    assert log_in(client, "eve").status_code == 302
    assert is_in_admin(client)


def test_the_admin_login_page_offers_the_optional_authenticator_code_field(client):
    page = client.get("/admin/login/")

    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="otp_token"' in html and 'autocomplete="one-time-code"' in html
    assert 'name="username"' in html and 'name="password"' in html


def test_the_lockout_page_speaks_the_staff_members_language():
    staff("fay")
    for _ in range(5):
        log_in(Client(), "fay", "wrong")

    locked = log_in(Client(headers={"Accept-Language": "es"}), "fay")

    assert locked.status_code == 429
    assert "Este acceso está bloqueado tras demasiados intentos fallidos" in locked.content.decode()


def test_behind_a_trusted_proxy_the_lockout_follows_the_forwarded_address_not_the_proxys(settings):
    settings.RATELIMIT_TRUSTED_PROXIES = 1
    staff("gus")

    def behind_the_proxy(client_address: str) -> Client:
        return Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=client_address)

    for _ in range(5):
        log_in(behind_the_proxy("198.51.100.1"), "gus", "wrong")
    attacker = log_in(behind_the_proxy("198.51.100.1"), "gus")
    colleague = behind_the_proxy("198.51.100.7")
    elsewhere = log_in(colleague, "gus")

    assert attacker.status_code == 429
    assert elsewhere.status_code == 302 and is_in_admin(colleague)
