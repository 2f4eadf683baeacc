"""cli/commands"""
