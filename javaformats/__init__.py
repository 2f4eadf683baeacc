"""Java and Pulsar formats, pure: what Pulsar's and BookKeeper's Java code prints and parses,
for every layer (api, cli, storage, placement, pipeline) to share. It imports nothing of ours and
does no I/O.

    jackson     Jackson's pretty printer and its String/int/long/double/boolean binding coercions
    gson        Gson's compact, HTML-safe JSON (a HashMap<String, String>)
    hashing     String.hashCode, HashMap/HashSet iteration order, Java's toString of values
    numbers     Long.parseLong, Integer.parseInt, Long.decode, Double.toString, uint64 as long
    properties  java.util.Properties files and broker.conf
    strings     String.split
    dates       Pulsar's DateFormatter (ISO offset date-time in a time zone)
    cookie      BookKeeper's bookie cookie (its text, its comparison and messages)
"""

from javaformats.cookie import Cookie, InvalidCookie
from javaformats.dates import format_date
from javaformats.gson import gson_hash_map, gson_string
from javaformats.hashing import hash_map_order, hash_set_order, java_string_hash, java_to_string
from javaformats.jackson import (
    jackson_bool,
    jackson_double,
    jackson_integer,
    jackson_long,
    jackson_object_refusal,
    jackson_pretty,
    jackson_string,
    jackson_string_field,
    jackson_text,
    jackson_token,
)
from javaformats.numbers import (
    decode_java_long,
    java_double,
    parse_java_int,
    parse_java_long,
    signed_long,
)
from javaformats.properties import (
    PropertyLine,
    parse_broker_conf,
    parse_properties,
    property_lines,
)
from javaformats.strings import java_split

__all__ = [
    "Cookie",
    "InvalidCookie",
    "PropertyLine",
    "decode_java_long",
    "format_date",
    "gson_hash_map",
    "gson_string",
    "hash_map_order",
    "hash_set_order",
    "jackson_bool",
    "jackson_double",
    "jackson_integer",
    "jackson_long",
    "jackson_object_refusal",
    "jackson_pretty",
    "jackson_string",
    "jackson_string_field",
    "jackson_text",
    "jackson_token",
    "java_double",
    "java_split",
    "java_string_hash",
    "java_to_string",
    "parse_broker_conf",
    "parse_java_int",
    "parse_java_long",
    "parse_properties",
    "property_lines",
    "signed_long",
]
