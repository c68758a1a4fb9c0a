"""Mathematical types (Stathopoulos & Teufel 2016): a type dictionary, type detection, type embeddings
and type-aware query expansion (TypesExp, Types2X)."""
