"""metastore"""
