#!/usr/bin/env bash
# Resolve Apache Kafka's jars from Maven Central into a cache directory outside the clone.
# Usage: scripts/fetch-kafka.sh [CACHE_DIR]   (default: $A2UI_STREAM_CACHE or ~/.cache/a2ui-stream)
# Prints the directory holding the jars. Re-running with the jars present does nothing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/kafka/pom.xml")"
cache="${1:-${A2UI_STREAM_CACHE:-$HOME/.cache/a2ui-stream}}"
libs="$cache/kafka-$version/libs"
if [ -f "$libs/.complete" ]; then
  echo "$libs"
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch-kafka: mvn is not installed; install Maven (and Java 17) or set KAFKA_BOOTSTRAP" >&2; exit 3; }
command -v java >/dev/null || { echo "fetch-kafka: java is not installed; install Java 17 or set KAFKA_BOOTSTRAP" >&2; exit 3; }
mkdir -p "$libs"
echo "fetch-kafka: resolving org.apache.kafka:kafka_2.13:$version from Maven Central into $libs" >&2
mvn -q -B -f "$here/kafka/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$libs" >&2
ls "$libs"/kafka_2.13-*.jar >/dev/null
touch "$libs/.complete"
echo "$libs"
