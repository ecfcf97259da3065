"""chakra"""
