"""The page shell: navbar, filter bar, figure cards and ids (controls), layout helpers and the shell's callbacks."""
