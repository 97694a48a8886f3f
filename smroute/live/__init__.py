"""Live fabric: local HCAs (pyverbs or sysfs), discovery through the local HCA
(``ibnetdiscover``), fabric change detection, and a long-running OpenSM for tests."""
