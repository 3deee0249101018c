import logging
import pickle

import pytest

from common.config import Secret, Settings, env_name, load_settings, reveal, settings_env_names
from common.errors import InvalidInput


def test_defaults_are_the_embedded_offline_setup() -> None:
    settings = load_settings({})
    assert settings.database_url is None
    assert settings.data_dir == ".ragu"
    assert not settings.uses_jwks


def test_reads_prefixed_variables_and_converts_types() -> None:
    settings = load_settings(
        {"DATABASE_URL": "postgresql://db/x", "RAGU_PORT": "9000", "RAGU_AUTO_MIGRATE": "false", "PATH": "/bin"}
    )
    assert settings.database_url == "postgresql://db/x"
    assert settings.port == 9000
    assert settings.auto_migrate is False


def test_unknown_ragu_variable_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput) as err:
        load_settings({"RAGU_PROT": "9000"})
    assert err.value.code == "unknown_setting"
    assert "RAGU_PROT" in err.value.detail


def test_bad_value_is_a_clear_error() -> None:
    with pytest.raises(InvalidInput) as err:
        load_settings({"RAGU_PORT": "eighty"})
    assert err.value.code == "invalid_setting"
    assert "RAGU_PORT" in err.value.detail


def test_every_field_has_one_environment_name() -> None:
    names = settings_env_names()
    assert len(names) == len(Settings.__struct_fields__)
    assert env_name("database_url") == "DATABASE_URL"
    assert env_name("log_level") == "RAGU_LOG_LEVEL"


def test_overrides_take_typed_values() -> None:
    assert load_settings({"RAGU_PORT": "1"}, port=2).port == 2


SECRETS = ("qdrant_api_key", "weaviate_api_key", "cohere_api_key", "openai_api_key", "auth_hs256_secret", "scim_token")


@pytest.mark.parametrize("field", SECRETS)
def test_a_secret_setting_never_prints_and_is_read_only_by_reveal(field: str, caplog: pytest.LogCaptureFixture) -> None:
    value = "s3cr3t-value-0123456789-abcdefghijklmnop"
    settings = load_settings({env_name(field): value})
    secret = getattr(settings, field)

    logging.getLogger("ragu.test").warning("settings %s, %r; %s", settings, secret, f"{secret} {secret:>20}")
    shown = [repr(settings), str(settings), str(secret), repr(secret), f"{secret}", caplog.text]
    assert all(value not in text for text in shown), shown
    assert f"{field}=<secret>" in repr(settings)
    assert secret.reveal() == value
    assert secret == Secret(value)
    assert secret != Secret("other")
    with pytest.raises(TypeError):
        pickle.dumps(settings)


def test_an_unset_secret_reveals_none_and_a_typed_override_is_kept() -> None:
    assert reveal(load_settings({}).openai_api_key) is None
    assert load_settings({}, openai_api_key=Secret("k")).openai_api_key == Secret("k")
