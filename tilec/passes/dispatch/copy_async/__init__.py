"""Variants of `copy_async`: a copy that runs on its own (TMA, tcgen05.cp)
and signals completion through the caller's mbarrier or bulk group; the
variant only issues it."""
