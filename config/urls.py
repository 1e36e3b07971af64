from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.utils.translation import pgettext_lazy
from drf_spectacular.views import SpectacularAPIView

from config.health import healthz
from config.metrics_view import metrics
from config.staff_login import OptionalOTPAuthenticationForm
from payments.ledger_views import ledger_page
from shop.views import manifest_public_key


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """Browsers ask for /favicon.ico on pages that name no icon (the admin's): the shop's icon, not a 404."""
    return HttpResponsePermanentRedirect(static("img/favicon.svg"))


# Optional TOTP: the admin login asks for a code only from a user with a confirmed TOTPDevice.
admin.site.login_form = OptionalOTPAuthenticationForm
# The admin names the shop, in the staff's language (Django's default is "Django administration").
admin.site.site_header = pgettext_lazy("staff", "B200 Pairs staff")
admin.site.site_title = pgettext_lazy("staff", "B200 Pairs staff")
admin.site.index_title = pgettext_lazy("staff", "Start page")

urlpatterns = [
    path("admin/ledger/", admin.site.admin_view(ledger_page), name="admin_ledger"),
    path("", include("config.old_admin_links")),  # before the admin, which would answer 404
    path("admin/", admin.site.urls),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/v1/", include("shop.api_urls")),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("ops/", include("shop.ops_urls")),
    path("manifest-key.pub", manifest_public_key, name="manifest_public_key"),
    path("favicon.ico", favicon, name="favicon"),
    path("", include("shop.urls")),
]
# A body too large or a form with too many fields: a 413 that says so (JSON under /api/), not a bare 400.
handler400 = "shop.error_views.bad_request"
# A staff page refused: the page names the roles that act there and links the person's own work.
handler403 = "config.forbidden.permission_denied"
# The database down or restarting: a 503 with Retry-After instead of a 500.
handler500 = "core.errors.server_error"
