from tests.placing import api_client, place_order  # noqa: F401  the API's own fixtures
