"""The degradation study: throws of random switch/link removal, every engine
routed side by side (Dmodc and OpenSM's), metrics to CSV and PNG plots."""
