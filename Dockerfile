# The data-preparation image:
#   docker run IMAGE MODEL_FILE RAW_DIR OUTPUT_DIR [local|cluster] [options]
# runs `recprep prepare` (see `recprep prepare --help`). Java is here for Spark.
# Add your own preprocessing dependencies by deriving an image:
#   FROM recprep
#   RUN pip install --no-cache-dir pillow pandas
FROM python:3.11-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

# gcc only while recprep installs: it builds recprep's C kernels (optional: without a
# compiler recprep works on numpy alone, slower on small records)
COPY . /opt/recprep
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir "/opt/recprep[spark,ray,s3]" \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /work
ENTRYPOINT ["recprep", "prepare"]
CMD ["--help"]
