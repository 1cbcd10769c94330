"""Attacker suite, section F: the head's HTTP server (CSRF, bodies before authentication, slow senders, logs in pages, invalid UTF-8) (issue 34).

Each attack is a function of (suite, check): `suite` is attacker_suite.Suite (its cluster,
the victim job K, the attacker job J and its JobPeer), `check(name, ok, detail)` records
PASS/FAIL. ATTACKS lists them in the order they run.
"""

TITLE = "F. HTTP: with job J's credential and without one"

ATTACKS = []
