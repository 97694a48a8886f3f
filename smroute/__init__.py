"""smroute: Dmodc routing for InfiniBand fat-trees."""

__version__ = "0.1.0"
