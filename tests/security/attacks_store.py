"""Attacker suite, section H: one arena per job: job J maps only its own objects (issue 34).

Each attack is a function of (suite, check): `suite` is attacker_suite.Suite (its cluster,
the victim job K, the attacker job J and its JobPeer), `check(name, ok, detail)` records
PASS/FAIL. ATTACKS lists them in the order they run.
"""

TITLE = "H. the object store from job J's processes"

ATTACKS = []
