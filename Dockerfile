# The admin service with its embedded etcd. Same install steps as the Makefile:
# Debian's etcd-server and Java 17 (for the Spark pipeline), a venv, the project.
FROM debian:bookworm-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3 python3-venv python3-pip etcd-server openjdk-17-jre-headless make \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/pulsar-isolation
COPY pyproject.toml README.md ./
COPY api ./api
COPY cli ./cli
COPY metastore ./metastore
COPY placement ./placement
COPY storage ./storage
COPY pipeline ./pipeline
COPY javaformats ./javaformats

RUN python3 -m venv .venv \
 && .venv/bin/pip install --no-cache-dir --upgrade pip \
 && .venv/bin/pip install --no-cache-dir '.[spark]'

ENV PATH="/opt/pulsar-isolation/.venv/bin:${PATH}"
VOLUME ["/var/lib/pulsar-isolation"]
EXPOSE 8080

# Without --metadata-store-url (or PULSAR_metadataStoreUrl) the service starts and supervises
# its own etcd with data in --data-dir.
ENTRYPOINT ["python", "-m", "api"]
CMD ["--port", "8080", "--data-dir", "/var/lib/pulsar-isolation"]
