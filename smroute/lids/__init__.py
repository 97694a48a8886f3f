"""LMC LID selection: per (source, destination) pair of a job, the
DLID whose path avoids hot spots (Naruse), on the routing's tables."""
