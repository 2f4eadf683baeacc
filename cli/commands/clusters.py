"""`pulsar-admin clusters`: clusters and their failure domains (`/admin/v2/clusters`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cli import reads
from cli.client import V2, AdminClient, path
from cli.context import admin
from cli.errors import ParameterError
from cli.framework import Output, command, new_group, positional
from cli.javafmt import FAILURE_DOMAIN
from cli.output import JsonResult, LinesResult, MapResult
from javaformats import hash_set_order, java_split

app = new_group("clusters", "Operations about clusters")

CLUSTERS = f"{V2}/clusters"
KEYSTORE_REQUIRED = (
    "You must specify tls-trust-store-type, tls-trust-store and tls-trust-store-pwd when "
    "enable tls-enable-keystore"
)
TRUST_CERTS_REQUIRED = (
    "You must specify tls-trust-certs-filepath when tls-enable-keystore is not enable"
)

Cluster = Annotated[str, positional("cluster-name")]
DomainName = Annotated[
    str, typer.Option("--domain-name", help="Failure domain name. Required.", show_default=False)
]
BrokerList = Annotated[
    str | None,
    typer.Option(
        "--broker-list",
        show_default=False,
        help="Comma separated broker list, each broker as `host:webServicePort` "
        "(e.g. broker-1:8080). Default: no brokers.",
    ),
]


def _text(flag: str, help: str) -> Any:
    return typer.Option(flag, help=help, show_default=False)


# ClusterData field <- option, in ClusterData's declaration order.
Url = Annotated[str | None, _text("--url", "service-url, e.g. http://pulsar.example.com:8080")]
UrlSecure = Annotated[str | None, _text(
    "--url-secure", "service-url for secure connection, e.g. https://pulsar.example.com:8443")]
BrokerUrl = Annotated[str | None, _text(
    "--broker-url", "broker-service-url, e.g. pulsar://pulsar.example.com:6650")]
BrokerUrlSecure = Annotated[str | None, _text(
    "--broker-url-secure",
    "broker-service-url for secure connection, e.g. pulsar+ssl://pulsar.example.com:6651")]
ProxyUrl = Annotated[str | None, _text(
    "--proxy-url", "Proxy-service url when client would like to connect to broker via proxy.")]
AuthPlugin = Annotated[str | None, _text("--auth-plugin", "authentication plugin")]
AuthParameters = Annotated[str | None, _text("--auth-parameters", "authentication parameters")]
ProxyProtocol = Annotated[str | None, _text(
    "--proxy-protocol", "protocol to decide type of proxy routing eg: SNI")]
TlsEnable = Annotated[bool | None, typer.Option(
    "--tls-enable", help="Enable tls connection. Default: off.")]
TlsAllowInsecure = Annotated[bool | None, typer.Option(
    "--tls-allow-insecure", help="Allow insecure tls connection. Default: off.")]
TlsEnableKeystore = Annotated[bool | None, typer.Option(
    "--tls-enable-keystore", help="Whether use KeyStore type to authenticate. Default: off.")]
TrustStoreType = Annotated[str | None, _text(
    "--tls-trust-store-type", "TLS TrustStore type configuration for internal client. "
    "Default: JKS.")]
TrustStore = Annotated[str | None, _text(
    "--tls-trust-store", "TLS TrustStore path for internal client")]
TrustStorePwd = Annotated[str | None, _text(
    "--tls-trust-store-pwd", "TLS TrustStore password for internal client")]
KeyStoreType = Annotated[str | None, _text(
    "--tls-key-store-type", "TLS KeyStore type configuration for internal client. "
    "Default: JKS.")]
KeyStore = Annotated[str | None, _text("--tls-key-store", "TLS KeyStore path for internal client")]
KeyStorePwd = Annotated[str | None, _text(
    "--tls-key-store-pwd", "TLS KeyStore password for internal client")]
TrustCerts = Annotated[str | None, _text(
    "--tls-trust-certs-filepath", "path for the trusted TLS certificate file")]
KeyFile = Annotated[str | None, _text(
    "--tls-key-filepath", "path for the TLS private key file")]
CertsFile = Annotated[str | None, _text(
    "--tls-certs-filepath", "path for the TLS certificate file")]
FactoryPlugin = Annotated[str | None, _text(
    "--tls-factory-plugin", "TLS Factory Plugin to be used to generate SSL Context and SSL Engine")]
FactoryParams = Annotated[str | None, _text(
    "--tls-factory-plugin-params", "Parameters used by the TLS Factory Plugin")]
ListenerName = Annotated[str | None, _text(
    "--listener-name", "listenerName when client would like to connect to cluster")]
ConfigFile = Annotated[Path | None, _text(
    "--cluster-config-file", "The path to a YAML config file specifying the cluster's "
    "configuration (ClusterData field names); options given on the command line win.")]  # fmt: skip


def load_config_file(config_file: Path | None) -> dict[str, Any]:
    if config_file is None:
        return {}
    import yaml  # only this option needs it (a tenth of pulsar-admin's start-up otherwise)

    try:
        loaded = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ParameterError(f"Failed to read cluster config file {config_file}: {exc}") from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ParameterError(f"Cluster config file {config_file} must hold a mapping")
    return loaded


DEFAULT_SSL_FACTORY_PLUGIN = "org.apache.pulsar.common.util.DefaultPulsarSslFactory"


def cluster_data(config_file: Path | None, fields: dict[str, Any]) -> dict[str, Any]:
    """ClusterData from the YAML file, then each given option over it; validated as the
    Java CLI does before sending."""
    # ClusterData.builder()'s defaults (Pulsar 4.0); the server reads the body without them
    data: dict[str, Any] = {
        "brokerClientTlsTrustStoreType": "JKS",
        "brokerClientTlsKeyStoreType": "JKS",
        "brokerClientSslFactoryPlugin": DEFAULT_SSL_FACTORY_PLUGIN,
    }
    data.update(load_config_file(config_file))
    data.update({key: value for key, value in fields.items() if value is not None})
    if data.get("brokerClientTlsEnabled"):
        if data.get("brokerClientTlsEnabledWithKeyStore"):
            trio = ("brokerClientTlsTrustStoreType", "brokerClientTlsTrustStore",
                    "brokerClientTlsTrustStorePassword")  # fmt: skip
            if any(not str(data.get(key) or "").strip() for key in trio):
                raise ParameterError(KEYSTORE_REQUIRED)
        elif not str(data.get("brokerClientTrustCertsFilePath") or "").strip():
            raise ParameterError(TRUST_CERTS_REQUIRED)
    return data


def _send_cluster(
    client: AdminClient, method: str, cluster: str, config_file: Path | None,
    fields: dict[str, Any],
) -> None:  # fmt: skip
    client.request(method, CLUSTERS + path(cluster), json_body=cluster_data(config_file, fields))


@command(app, "list")
def list_clusters(
    ctx: typer.Context,
    current: Annotated[bool, typer.Option(
        "-c", "--current", help="Print the current cluster with (*)")] = False,
    output: Output = None,
) -> LinesResult:  # fmt: skip
    """List the existing clusters, one per line (the `global` pseudo-cluster excluded)."""
    return reads.list_clusters(admin(ctx), current)


@command(app, "get")
def get_cluster(ctx: typer.Context, cluster: Cluster, output: Output = None) -> JsonResult:
    """Get the configuration data for the specified cluster, as JSON (ClusterData)."""
    return reads.get_cluster(admin(ctx), cluster)


def _cluster_command(name: str, method: str, doc: str) -> None:
    def run(
        ctx: typer.Context,
        cluster: Cluster,
        url: Url = None,
        url_secure: UrlSecure = None,
        broker_url: BrokerUrl = None,
        broker_url_secure: BrokerUrlSecure = None,
        proxy_url: ProxyUrl = None,
        auth_plugin: AuthPlugin = None,
        auth_parameters: AuthParameters = None,
        proxy_protocol: ProxyProtocol = None,
        tls_enable: TlsEnable = None,
        tls_allow_insecure: TlsAllowInsecure = None,
        tls_enable_keystore: TlsEnableKeystore = None,
        tls_trust_store_type: TrustStoreType = None,
        tls_trust_store: TrustStore = None,
        tls_trust_store_pwd: TrustStorePwd = None,
        tls_key_store_type: KeyStoreType = None,
        tls_key_store: KeyStore = None,
        tls_key_store_pwd: KeyStorePwd = None,
        tls_trust_certs_filepath: TrustCerts = None,
        tls_key_filepath: KeyFile = None,
        tls_certs_filepath: CertsFile = None,
        tls_factory_plugin: FactoryPlugin = None,
        tls_factory_plugin_params: FactoryParams = None,
        listener_name: ListenerName = None,
        cluster_config_file: ConfigFile = None,
        output: Output = None,
    ) -> None:
        fields = {
            "serviceUrl": url,
            "serviceUrlTls": url_secure,
            "brokerServiceUrl": broker_url,
            "brokerServiceUrlTls": broker_url_secure,
            "proxyServiceUrl": proxy_url,
            "authenticationPlugin": auth_plugin,
            "authenticationParameters": auth_parameters,
            "proxyProtocol": proxy_protocol,
            "brokerClientTlsEnabled": tls_enable,
            "tlsAllowInsecureConnection": tls_allow_insecure,
            "brokerClientTlsEnabledWithKeyStore": tls_enable_keystore,
            "brokerClientTlsTrustStoreType": tls_trust_store_type,
            "brokerClientTlsTrustStore": tls_trust_store,
            "brokerClientTlsTrustStorePassword": tls_trust_store_pwd,
            "brokerClientTlsKeyStoreType": tls_key_store_type,
            "brokerClientTlsKeyStore": tls_key_store,
            "brokerClientTlsKeyStorePassword": tls_key_store_pwd,
            "brokerClientTrustCertsFilePath": tls_trust_certs_filepath,
            "brokerClientKeyFilePath": tls_key_filepath,
            "brokerClientCertificateFilePath": tls_certs_filepath,
            "brokerClientSslFactoryPlugin": tls_factory_plugin,
            "brokerClientSslFactoryPluginParams": tls_factory_plugin_params,
            "listenerName": listener_name,
        }
        _send_cluster(admin(ctx), method, cluster, cluster_config_file, fields)

    run.__doc__ = doc
    run.__name__ = name.replace("-", "_") + "_cluster"
    command(app, name)(run)


_cluster_command(
    "create", "PUT", "Provisions a new cluster. This operation requires Pulsar super-user "
    "privileges. Unset options take ClusterData.builder()'s defaults.")
_cluster_command(
    "update", "POST", "Update the configuration for a cluster. This replaces the whole "
    "configuration: options not given are reset, as upstream.")  # fmt: skip


@command(app, "delete")
def delete_cluster(
    ctx: typer.Context,
    cluster: Cluster,
    all_data: Annotated[bool, typer.Option(
        "-a", "--all", help="Delete all data (tenants) of the cluster first: every namespace "
        "(forcefully) and tenant.")] = False,
    output: Output = None,
) -> None:  # fmt: skip
    """Deletes an existing cluster."""
    client = admin(ctx)
    if all_data:
        for tenant in client.get_json(f"{V2}/tenants") or []:
            for namespace in client.get_json(f"{V2}/namespaces{path(tenant)}") or []:
                tenant_name, _, ns = namespace.partition("/")
                client.delete(f"{V2}/namespaces{path(tenant_name, ns)}", {"force": "true"})
            client.delete(f"{V2}/tenants{path(tenant)}", {"force": "false"})
    client.delete(CLUSTERS + path(cluster))


PeerClusters = Annotated[
    str,
    typer.Option("--peer-clusters", show_default=False,
                 help='Comma separated peer-cluster names (Pass empty string "" to delete list)'),
]


@command(app, "update-peer-clusters")
def update_peer_clusters(
    ctx: typer.Context, cluster: Cluster, peer_clusters: PeerClusters, output: Output = None
) -> None:
    """Update peer cluster names. This operation requires Pulsar super-user privileges."""
    # `Sets.newLinkedHashSet(split(","))`, or null (clearing the list) for a blank value
    blank = not peer_clusters.strip()
    peers = None if blank else list(dict.fromkeys(java_split(peer_clusters, ",")))
    admin(ctx).post(CLUSTERS + path(cluster, "peers"), peers)


@command(app, "get-peer-clusters")
def get_peer_clusters(ctx: typer.Context, cluster: Cluster, output: Output = None) -> JsonResult:
    """Get list of peer-clusters, as JSON (`null` when none are set)."""
    peers = admin(ctx).get_json(CLUSTERS + path(cluster, "peers"))
    # the Java client reads the list into a `Set<String>`: a HashSet's order
    return JsonResult(None if peers is None else hash_set_order(peers))


def failure_domain(broker_list: str | None) -> dict[str, Any]:
    """`FailureDomainImpl.builder().brokers(new HashSet(split))`: no brokers -> `{}`."""
    if broker_list is None or not broker_list.strip():
        return {}
    return {"brokers": hash_set_order(broker_list.split(","), copied=True)}


def as_read(domain: dict[str, Any] | None) -> dict[str, Any] | None:
    """A FailureDomain as the Java client holds it: `brokers` in HashSet order."""
    if domain is None or not isinstance(domain.get("brokers"), list):
        return domain
    return {**domain, "brokers": hash_set_order(domain["brokers"])}


def _domain_path(cluster: str, domain: str) -> str:
    return CLUSTERS + path(cluster, "failureDomains", domain)


@command(app, "create-failure-domain")
def create_failure_domain(
    ctx: typer.Context,
    cluster: Cluster,
    domain_name: DomainName,
    broker_list: BrokerList = None,
    output: Output = None,
) -> None:
    """Create a new failure-domain for a cluster. updates it if already created. A broker
    may belong to one failure domain only."""
    admin(ctx).post(_domain_path(cluster, domain_name), failure_domain(broker_list))


@command(app, "update-failure-domain")
def update_failure_domain(
    ctx: typer.Context,
    cluster: Cluster,
    domain_name: DomainName,
    broker_list: BrokerList = None,
    output: Output = None,
) -> None:
    """Update failure-domain for a cluster. Creates a new one if not exist."""
    admin(ctx).post(_domain_path(cluster, domain_name), failure_domain(broker_list))


@command(app, "get-failure-domain")
def get_failure_domain(
    ctx: typer.Context, cluster: Cluster, domain_name: DomainName, output: Output = None
) -> JsonResult:
    """Get the configuration brokers of a failure-domain, as JSON `{"brokers" : [...]}`."""
    return JsonResult(as_read(admin(ctx).get_json(_domain_path(cluster, domain_name))))


@command(app, "list-failure-domains")
def list_failure_domains(ctx: typer.Context, cluster: Cluster, output: Output = None) -> MapResult:
    """List the existing failure-domains for a cluster: one line per domain,
    `<domain>    FailureDomainImpl(brokers=[...])`."""
    domains = admin(ctx).get_json(CLUSTERS + path(cluster, "failureDomains")) or {}
    return MapResult(domains, FAILURE_DOMAIN)


@command(app, "delete-failure-domain")
def delete_failure_domain(
    ctx: typer.Context, cluster: Cluster, domain_name: DomainName, output: Output = None
) -> None:
    """Deletes an existing failure-domain."""
    admin(ctx).delete(_domain_path(cluster, domain_name))
