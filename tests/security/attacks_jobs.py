"""Attacker suite, section G: placement groups, resource amounts, what a job reports, cross-job queries, names, packages (issue 34).

Each attack is a function of (suite, check): `suite` is attacker_suite.Suite (its cluster,
the victim job K, the attacker job J and its JobPeer), `check(name, ok, detail)` records
PASS/FAIL. ATTACKS lists them in the order they run.
"""

TITLE = "G. job J's messages about what is not its own"

ATTACKS = []
