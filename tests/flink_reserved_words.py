"""Regenerates the word list of ``colcep/lang/sql/flink_reserved.py``: the tokens of Flink's SQL
parser that it refuses as an identifier. Run with PyFlink 2.3 (../shared/tools/flink_sql_oracle):

1. take ``flink-table-planner.jar`` out of pyflink's ``lib/flink-table-planner-loader-*.jar``;
2. ``javap -constants -c`` its ``org/apache/flink/sql/parser/impl/FlinkSqlParserImplConstants``
   and keep the quoted words of ``tokenImage``, one per line, in ``tokens.txt``;
3. ``$FLINK_VENV/bin/python tests/flink_reserved_words.py tokens.txt > reserved.txt``.
"""
import sys
from pyflink.table import EnvironmentSettings, TableEnvironment
env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
words = [w.strip() for w in open(sys.argv[1]) if w.strip()]
reserved = []
for w in words:
    try:
        env.sql_query(f"SELECT 1 AS {w}")
    except Exception as e:
        if "parse" in str(e).lower() or "Encountered" in str(e):
            reserved.append(w)
        else:
            print("other", w, str(e)[:100], file=sys.stderr)
print("\n".join(reserved))
