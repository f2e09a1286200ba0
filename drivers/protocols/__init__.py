"""Shoe protocol parsers: pure, bounded, incremental (``base.ShoeParser``)."""
