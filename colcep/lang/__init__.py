"""Front-ends: text and data that become a :class:`~colcep.Pattern` (one direction only).

- :mod:`~colcep.lang.json_format`: patterns as JSON documents (``Pattern.to_json`` / ``from_json``);
- :mod:`~colcep.lang.sase`: the SASE+ paper's query language (``colcep.sase``);
- :mod:`~colcep.lang.sql`: SQL ``MATCH_RECOGNIZE`` (``colcep.sql``).
"""
