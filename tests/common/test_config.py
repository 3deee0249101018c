import logging
import pickle

import msgspec
import pytest

from common.config import Secret, Settings, env_name, load_settings, reveal, settings_env_names
from common.errors import InvalidInput

SECRETS = ("qdrant_api_key", "weaviate_api_key", "cohere_api_key", "openai_api_key", "auth_hs256_secret", "scim_token")


def test_defaults_are_the_embedded_offline_setup() -> None:
    settings = load_settings({})
    assert settings.database.url is None
    assert settings.server.data_dir == ".ragu"
    assert not settings.auth.uses_jwks


def test_reads_prefixed_variables_and_converts_types() -> None:
    settings = load_settings(
        {"DATABASE_URL": "postgresql://db/x", "RAGU_PORT": "9000", "RAGU_AUTO_MIGRATE": "false", "PATH": "/bin"}
    )
    assert settings.database.url == "postgresql://db/x"
    assert settings.server.port == 9000
    assert settings.database.auto_migrate is False


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


def _group_fields() -> list[tuple[str, str]]:
    return [
        (group.name, field.name)
        for group in msgspec.structs.fields(Settings)
        for field in msgspec.structs.fields(group.type)  # type: ignore[arg-type]
    ]


def test_every_environment_name_maps_to_exactly_one_group_field() -> None:
    names = settings_env_names()
    fields = _group_fields()
    assert len(names) == len(fields) == len(set(fields))
    assert env_name("database_url") == "DATABASE_URL"
    assert env_name("log_level") == "RAGU_LOG_LEVEL"


NOT_DEFAULT = {
    "RAGU_LOG_FORMAT": "json",
    "RAGU_OTEL_EXPORTER": "console",
    "RAGU_DIRECTORY_USER_ATTRIBUTE": "externalId",
    "RAGU_METRICS": "false",
    "RAGU_AUTO_MIGRATE": "false",
    "RAGU_CHONKIT_INPROCESS_WORKER": "false",
    "RAGU_SOURCE_ALLOW_PRIVATE_URLS": "true",
    "RAGU_OIDC_USE_ID_TOKEN": "true",
}


def test_each_variable_lands_in_its_own_group_field() -> None:
    """Set one variable at a time: exactly one group field differs from the defaults, and always a different one."""
    default = Settings()
    landed = {}
    for name in sorted(settings_env_names()):
        settings = load_settings({name: NOT_DEFAULT.get(name, "7")})
        changed = [
            (g, f) for g, f in _group_fields() if getattr(getattr(settings, g), f) != getattr(getattr(default, g), f)
        ]
        assert len(changed) == 1, (name, changed)
        landed[name] = changed[0]
    assert sorted(landed.values()) == sorted(_group_fields())
    assert landed["DATABASE_URL"] == ("database", "url")
    assert landed["RAGU_AUTH_JWKS_URL"] == ("auth", "jwks_url")
    assert landed["RAGU_LOCAL_LLM_THREADS"] == ("local_llm", "threads")
    assert landed["RAGU_SCIM_TOKEN"] == ("directory", "scim_token")


def test_flat_overrides_land_in_their_group() -> None:
    settings = load_settings({"RAGU_PORT": "1"}, port=2, auth_hs256_secret=Secret("x" * 40), data_dir="/d")
    assert settings.server.port == 2
    assert settings.server.data_path.as_posix() == "/d"
    assert settings.auth.hs256_secret == Secret("x" * 40)
    replaced = settings.with_(database_url="postgresql://db/y", local_llm_threads=3)
    assert (replaced.database.url, replaced.local_llm.threads, replaced.server.port) == ("postgresql://db/y", 3, 2)
    assert settings.database.url is None


def test_an_unknown_override_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput) as err:
        load_settings({}, prot=1)
    assert (err.value.code, "prot") == ("unknown_setting", err.value.detail.rpartition(" ")[2])


@pytest.mark.parametrize("field", SECRETS)
def test_a_secret_setting_never_prints_and_is_read_only_by_reveal(field: str, caplog: pytest.LogCaptureFixture) -> None:
    value = "s3cr3t-value-0123456789-abcdefghijklmnop"
    settings = load_settings({env_name(field): value})
    [(group, name)] = [(g, f) for g, f in _group_fields() if isinstance(getattr(getattr(settings, g), f), Secret)]
    secret = getattr(getattr(settings, group), name)

    logging.getLogger("ragu.test").warning("settings %s, %r; %s", settings, secret, f"{secret} {secret:>20}")
    shown = [repr(settings), str(settings), str(secret), repr(secret), f"{secret}", caplog.text]
    assert all(value not in text for text in shown), shown
    assert f"{name}=<secret>" in repr(getattr(settings, group))
    assert "=<secret>" in repr(settings)
    assert secret.reveal() == value
    assert secret == Secret(value)
    assert secret != Secret("other")
    with pytest.raises(TypeError):
        pickle.dumps(settings)


def test_an_unset_secret_reveals_none_and_a_typed_override_is_kept() -> None:
    assert reveal(load_settings({}).openai.api_key) is None
    assert load_settings({}, openai_api_key=Secret("k")).openai.api_key == Secret("k")
