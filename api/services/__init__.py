"""api/services"""
