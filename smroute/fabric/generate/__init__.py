"""Generated fabrics: PGFT, XGFT, k-ary n-trees, thin and
slender trees, and real-world shapes."""
