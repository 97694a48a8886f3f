"""Live discovery: the local HCA ports (pyverbs or sysfs), the fabric
discovered through one (``ibnetdiscover``), and change detection between two
discovered fabrics (:mod:`.changes`)."""
