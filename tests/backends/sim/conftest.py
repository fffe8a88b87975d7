import pytest

from apps import load_app


@pytest.fixture(scope="session")
def ob():
    return load_app("online-boutique")
