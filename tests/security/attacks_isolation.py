"""Attacker suite, section I: what a job's processes can reach on the machine: the token, other jobs' credentials and files, signals (issue 34).

Each attack is a function of (suite, check): `suite` is attacker_suite.Suite (its cluster,
the victim job K, the attacker job J and its JobPeer), `check(name, ok, detail)` records
PASS/FAIL. ATTACKS lists them in the order they run.
"""

TITLE = "I. a submitted job's own code"

ATTACKS = []
