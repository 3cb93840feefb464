"""Moving memories in bulk: import, reindex, backup, restore and export."""
