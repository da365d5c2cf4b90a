"""Every rule has a stable id, a severity, a title, docs and a fix; ids are unique and shaped."""

import re

from ckptfix.audit import RULES
from ckptfix.audit.model import SEVERITIES


def test_every_rule_is_documented() -> None:
    assert len(RULES) >= 25
    for rule_id, rule in RULES.items():
        assert re.fullmatch(r"[A-Z]+(-[A-Z0-9]+)+", rule_id), rule_id
        assert rule.id == rule_id
        assert rule.severity in SEVERITIES
        assert rule.title and rule.title[0].isupper() and not rule.title.endswith(".")
        assert len(rule.docs) > 40, rule_id
        assert rule.fix, rule_id
