"""The `Guard` the settings ask for, built once at start (a bad key fails the start)."""

from __future__ import annotations

from api.auth.authentication import ProviderChain, TlsAuthenticator, TokenAuthenticator
from api.auth.authorization import OPEN, Guard
from api.settings import TOKEN_PROVIDER, Settings
from metastore.repositories import Repositories
from metastore.store import MetadataStore


def build_guard(settings: Settings, store: MetadataStore) -> Guard:
    if not settings.authenticationEnabled:
        return OPEN
    providers: list[TokenAuthenticator | TlsAuthenticator] = []
    for name in dict.fromkeys(settings.authenticationProviders):  # in order, once each
        if name == TOKEN_PROVIDER:
            providers.append(
                TokenAuthenticator.from_settings(
                    secret_key=settings.tokenSecretKey,
                    public_key=settings.tokenPublicKey,
                    public_alg=settings.tokenPublicAlg,
                    role_claim=settings.tokenAuthClaim,
                    audience_claim=settings.tokenAudienceClaim,
                    audience=settings.tokenAudience,
                )
            )
        else:
            providers.append(TlsAuthenticator())
    authenticator = ProviderChain(tuple(providers))

    documents = Repositories(store)
    tenants = documents.tenants

    async def tenant_admins(tenant: str) -> frozenset[str] | None:
        if not tenant or "/" in tenant:
            return frozenset()
        found = await tenants.get(tenant)
        if found is None:
            return None
        info = found.value_or(None)
        return frozenset() if info is None else frozenset(info.adminRoles)

    async def namespace_exists(tenant: str, namespace: str) -> bool:
        return await documents.policies.get_cached(tenant, namespace) is not None

    return Guard(
        authenticator=authenticator,
        authorization_enabled=settings.authorizationEnabled,
        super_users=frozenset(settings.superUserRoles),
        tenant_admins=tenant_admins,
        namespace_exists=namespace_exists,
    )
